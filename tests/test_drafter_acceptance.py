"""One drafter's own measured acceptance (``acceptance.drafters.NAME``): a sweep of mtp1 (its own drafter, mtp)
beside dspark runs each drafter on its own acceptance, where a single ``acceptance.length`` ran both on one."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import make_trace
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload.synth import synth_trace

EXACT = ["acceptance.sigma_request=0", "acceptance.sigma_step=0", "acceptance.sigma_token=0"]


def test_a_drafters_entry_replaces_the_sections_drafter_keys_for_that_drafter_only():
    sc = load_scenario(overrides=["acceptance.constant_alpha=0.6", "acceptance.rates.code=[0.9]",
                                  "acceptance.sigma_step=0.5", "acceptance.drafters.mtp.length=1.8"])
    mtp = sc.acceptance.for_drafter("mtp")
    assert (mtp.length, mtp.constant_alpha, mtp.rates, mtp.drafters) == (1.8, None, {}, {})
    assert mtp.sigma_step == 0.5                         # the latent parameters stay the section's
    assert sc.acceptance.for_drafter("dspark") is sc.acceptance
    args = sc.acceptance.model_args("mtp")
    assert "drafters" not in args and args["length"] == 1.8 and args["constant_alpha"] is None


def test_mtp1_beside_dspark_each_on_its_own_acceptance():
    trace = synth_trace(120, 20.0, seed=3, prompt_len=200, output_len=80)
    base = [*EXACT, "acceptance.constant_alpha=0.75"]
    own = load_scenario(overrides=[*base, "acceptance.drafters.mtp.constant_alpha=0.5"])
    shared = load_scenario(overrides=base)
    # mtp1 (gamma 1): its own alpha, so tokens per verify step 1 + alpha
    mtp = simulate(trace, "mtp1", own, seed=0, concurrency=8).summary
    assert mtp["acceptance_rate"] == pytest.approx(0.5, abs=0.03)
    assert mtp["mean_acceptance_length"] == pytest.approx(1.5, abs=0.03)
    assert simulate(trace, "mtp1", shared, seed=0, concurrency=8).summary["acceptance_rate"] == pytest.approx(
        0.75, abs=0.03)
    # dspark's run does not see mtp's entry: the same numbers, draw for draw, as without it
    a = simulate(trace, "static", own, gamma=4, seed=0, concurrency=8).summary
    b = simulate(trace, "static", shared, gamma=4, seed=0, concurrency=8).summary
    for key in ("mean_acceptance_length", "output_throughput", "mean_tpot_ms"):
        assert a[key] == b[key]
    tau = (1 - 0.75 ** 5) / (1 - 0.75)                   # static 4 at alpha 0.75, closed form
    assert a["mean_acceptance_length"] == pytest.approx(tau, rel=0.03)


def test_the_forced_drafter_notice_goes_once_the_drafter_has_its_own():
    trace = make_trace([0.0, 0.0], [100, 100], [30, 30])
    given = ['drafter.name="ngram"', "acceptance.length=1.5"]
    noticed = simulate(trace, "mtp1", load_scenario(overrides=given)).summary["acceptance_notice"]
    assert "acceptance.drafters.mtp" in noticed
    sc = load_scenario(overrides=[*given, "acceptance.drafters.mtp.length=1.7"])
    assert simulate(trace, "mtp1", sc).summary["acceptance_notice"] is None


def test_a_length_no_mtp_run_can_reach_points_to_the_drafters_own_entry(tmp_path):
    trace = make_trace([0.0], [100], [30])
    with pytest.raises(SpecsimInputError, match=r"acceptance\.drafters\.mtp\.length") as e:
        simulate(trace, "mtp1", load_scenario(overrides=["acceptance.length=3.2"]))
    assert e.value.field == "acceptance.length"
    # set in a file: the file and the line of the drafter's own entry
    f = tmp_path / "s.toml"
    f.write_text("[acceptance]\nlength = 3.2\n\n[acceptance.drafters.mtp]\nlength = 2.5\n")
    with pytest.raises(SpecsimInputError) as e:
        simulate(trace, "mtp1", load_scenario(f))
    assert (e.value.file, e.value.line, e.value.field) == (str(f), 5, "acceptance.drafters.mtp.length")
    # the same value from --set over the file: not the file's line
    with pytest.raises(SpecsimInputError) as e:
        simulate(trace, "mtp1", load_scenario(f, ["acceptance.drafters.mtp.length=2.4"]))
    assert e.value.file is None and e.value.got == "2.4"


@pytest.mark.parametrize("item, field", [
    ("acceptance.drafters.mtpp.length=1.8", "acceptance.drafters.mtpp"),
    ("acceptance.drafters.none.length=1.8", "acceptance.drafters.none"),
    ("acceptance.drafters.mtp.table=fig2", "acceptance.drafters.mtp.table"),
    ("acceptance.drafters.mtp.sigma_step=0.1", "acceptance.drafters.mtp.sigma_step"),
    ("acceptance.drafters.mtp.length=0.5", "acceptance.drafters.mtp.length"),
    ('acceptance.drafters.mtp.length="1.8"', "acceptance.drafters.mtp.length"),
    ("acceptance.drafters.mtp=3", "acceptance.drafters"),
])
def test_bad_drafter_entries_name_their_key(item, field):
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(overrides=[item])
    assert e.value.field == field and e.value.file == f"--set {item}"


def test_a_scenario_file_sets_one_drafters_acceptance_as_a_table(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("[acceptance]\nlength = 3.0\n\n[acceptance.drafters.mtp]\nlength = 1.8\n"
                 "\n[acceptance.drafters.eagle3]\nrates = {chat = [0.7, 0.6, 0.5]}\n")
    sc = load_scenario(f)
    assert sc.acceptance.for_drafter("mtp").length == 1.8
    assert sc.acceptance.for_drafter("eagle3").rates == {"chat": [0.7, 0.6, 0.5]}
    assert sc.acceptance.for_drafter("dspark").length == 3.0
    assert np.isclose(sc.acceptance.length, 3.0)


def test_an_unused_drafters_table_leaves_the_scenario_and_its_hash_as_before():
    # sweep folders refuse points of another scenario hash: a key every scenario now has would have refused every
    # folder made before it existed; an empty table is left out of the resolved scenario, an entry is not
    plain = load_scenario()
    assert "drafters" not in plain.to_dict()["acceptance"]
    own = load_scenario(overrides=["acceptance.drafters.mtp.length=1.8"])
    assert own.to_dict()["acceptance"]["drafters"] == {"mtp": {"length": 1.8}} and own.hash() != plain.hash()
    assert plain.with_updates({"acceptance": plain.to_dict()["acceptance"]}).hash() == plain.hash()


def test_a_drafter_name_in_other_case_is_pointed_to_its_own():
    from specsim.errors import closest

    with pytest.raises(SpecsimInputError, match="closest valid: 'mtp'"):
        load_scenario(overrides=["acceptance.drafters.MTP.length=1.8"])
    assert closest("DSpark", ["dspark", "dflash"]) == "dspark" and closest("zzz", ["mtp"]) is None
