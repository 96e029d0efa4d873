"""Scenario configuration: one place of the defaults, None for unset, validation on construction."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import MISSING, fields, replace

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.scenario import (DEFAULT_SCENARIO, SECTIONS, AcceptanceConfig, ClusterConfig, DrafterConfig,
                              EngineConfig, PolicyConfig, PrefillConfig, ProfileConfig, Scenario,
                              load_scenario, parse_override)
from specsim.scenario_schema import describe_scenario

DEFAULT_TOML = tomllib.loads(DEFAULT_SCENARIO.read_text())


def _default(f):
    return f.default_factory() if f.default is MISSING else f.default


def _section_text(name: str) -> str:
    """The lines of default.toml from ``[name]`` (or ``[name.x]``) up to the next other section."""
    text = DEFAULT_SCENARIO.read_text()
    start = re.search(rf"^\[{name}(\.\w+)?\]", text, re.M).start()
    nxt = [m.start() for m in re.finditer(r"^\[(\w+)", text, re.M) if m.start() > start
           and not text[m.start() + 1:].startswith(name)]
    return text[start:min(nxt, default=len(text))]


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_default_toml_equals_dataclass_defaults_field_by_field(section):
    cls = SECTIONS[section]
    in_file = DEFAULT_TOML.get(section, {})
    assert set(in_file) <= {f.name for f in fields(cls)}, f"unknown keys in default.toml [{section}]"
    for f in fields(cls):
        want = _default(f)
        if want is None:
            assert f.name not in in_file, f"{section}.{f.name}: None by default, so left out of default.toml"
        else:
            assert f.name in in_file, f"{section}.{f.name} missing from default.toml"
            got = in_file[f.name]
            assert got == want and type(got) is type(want), f"{section}.{f.name}: file {got!r} != {want!r}"


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_every_key_is_documented_in_default_toml_with_a_comment(section):
    text = _section_text(section)
    for f in fields(SECTIONS[section]):
        line = next((ln for ln in text.splitlines() if re.match(rf"#?\s*{f.name}\s*=", ln)), None)
        if f.name in ("rates", "knobs", "drafters"):   # tables: their own [section.key] header, a comment below
            assert f"[{section}.{f.name}]" in text
            continue
        assert line is not None, f"{section}.{f.name} not in default.toml"
        assert "#" in line.lstrip("#"), f"{section}.{f.name}: no comment with its source"


def test_loaded_defaults_equal_python_defaults():
    assert load_scenario().to_dict() == Scenario().to_dict()
    assert load_scenario().hash() == Scenario().hash()


@pytest.mark.parametrize("section, key", [
    ("drafter", "base_fraction"), ("drafter", "per_draft_fraction"), ("drafter", "kv_fraction"),
    ("prefill", "time_per_token_s"), ("profile", "lookup"), ("acceptance", "constant_alpha"),
    ("acceptance", "table"), ("acceptance", "model"), ("acceptance", "temperatures"),
])
def test_sentinels_are_gone_unset_is_none(section, key):
    assert getattr(getattr(load_scenario(), section), key) is None
    assert getattr(SECTIONS[section](), key) is None
    assert json.loads(json.dumps(load_scenario().to_dict()))[section][key] is None


@pytest.mark.parametrize("item, field", [
    ("drafter.base_fraction=-1.0", "drafter.base_fraction"),
    ("drafter.per_draft_fraction=-1", "drafter.per_draft_fraction"),
    ("prefill.time_per_token_s=0.0", "prefill.time_per_token_s"),
    ("profile.lookup=''", "profile.lookup"),
    ("acceptance.constant_alpha=0.0", "acceptance.constant_alpha"),
    ("acceptance.table=''", "acceptance.table"),
    ("acceptance.model=''", "acceptance.model"),
    ("acceptance.temperatures=''", "acceptance.temperatures"),
])
def test_old_sentinel_values_are_rejected_not_reinterpreted(item, field):
    with pytest.raises(SpecsimInputError, match=re.escape(field)) as e:
        load_scenario(overrides=[item])
    assert e.value.file == f"--set {item}" and e.value.field == field and "leave it out" in e.value.expected


@pytest.mark.parametrize("build, field", [
    (lambda: ClusterConfig(num_replicas=0), "cluster.num_replicas"),
    (lambda: ClusterConfig(router="random"), "cluster.router"),
    (lambda: ClusterConfig(kv_allocation="lazy"), "cluster.kv_allocation"),
    (lambda: ClusterConfig(block_size=0), "cluster.block_size"),
    (lambda: ClusterConfig(kv_capacity_tokens=8, block_size=16), "cluster.kv_capacity_tokens"),
    (lambda: ClusterConfig(prefix_caching=1), "cluster.prefix_caching"),
    (lambda: ClusterConfig(max_num_seqs=2.5), "cluster.max_num_seqs"),
    (lambda: PrefillConfig(mode="split"), "prefill.mode"),
    (lambda: PrefillConfig(time_per_token_s=-1e-5), "prefill.time_per_token_s"),
    (lambda: ProfileConfig(lookup="nearest"), "profile.lookup"),
    (lambda: DrafterConfig(name="medusa"), "drafter.name"),
    (lambda: DrafterConfig(kv_fraction=-0.1), "drafter.kv_fraction"),
    (lambda: DrafterConfig(base_fraction=float("nan")), "drafter.base_fraction"),
    (lambda: AcceptanceConfig(sigma_request=-1), "acceptance.sigma_request"),
    (lambda: AcceptanceConfig(constant_alpha=1.0), "acceptance.constant_alpha"),
    (lambda: AcceptanceConfig(rates={"legal": [0.8, 1.2]}), "acceptance.rates.legal"),     # the bad row's key
    (lambda: AcceptanceConfig(rates={"legal": [0.8], "tax": []}), "acceptance.rates.tax"),
    (lambda: AcceptanceConfig(model="fitted:"), "acceptance.model"),
    (lambda: AcceptanceConfig(calibration="platt"), "acceptance.calibration"),
    (lambda: EngineConfig(gamma=65), "engine.gamma"),
    (lambda: EngineConfig(request_overhead_s=-0.001), "engine.request_overhead_s"),
    (lambda: EngineConfig(emission_overhead_s="fast"), "engine.emission_overhead_s"),
    (lambda: PolicyConfig(knobs={"threshold": None}), "policy.knobs.threshold"),
    (lambda: PolicyConfig(knobs={"not a name": 1}), "policy.knobs"),
    (lambda: PolicyConfig(knobs={"draft_len_schedule": {"16": [3]}}), "policy.knobs.draft_len_schedule"),
    (lambda: replace(EngineConfig(), gamma=-1), "engine.gamma"),
    (lambda: Scenario(cluster={"num_replicas": 2}), "cluster"),
])
def test_python_construction_validates(build, field):
    with pytest.raises(SpecsimInputError) as e:
        build()
    assert e.value.field == field and e.value.file is None
    assert f"field '{field}'" in str(e.value)


def test_python_construction_coerces_to_plain_types():
    c = ClusterConfig(num_replicas=np.int64(2), kv_capacity_tokens=4096.0, prefix_caching=np.bool_(False))
    assert (c.num_replicas, c.kv_capacity_tokens, c.prefix_caching) == (2, 4096, False)
    assert type(c.num_replicas) is int and type(c.kv_capacity_tokens) is int and type(c.prefix_caching) is bool
    e = EngineConfig(host_overhead_s=1, request_overhead_s=np.float32(0.25))
    assert type(e.host_overhead_s) is float and e.request_overhead_s == 0.25
    assert ProfileConfig(lookup=None).lookup is None and PrefillConfig(time_per_token_s=2e-5).time_per_token_s == 2e-5


@pytest.mark.parametrize("item, section, key, value", [
    ("cluster.kv_allocation=reserve", "cluster", "kv_allocation", "reserve"),
    ("cluster.block_size=32", "cluster", "block_size", 32),
    ("cluster.prefix_caching=false", "cluster", "prefix_caching", False),
    ("cluster.router=prefix-aware", "cluster", "router", "prefix-aware"),
    ("engine.request_overhead_s=0.012", "engine", "request_overhead_s", 0.012),
    ("engine.emission_overhead_s=2e-5", "engine", "emission_overhead_s", 2e-5),
    ("engine.request_overhead_s=0", "engine", "request_overhead_s", 0.0),
    ("drafter.kv_fraction=0.25", "drafter", "kv_fraction", 0.25),
    ("drafter.base_fraction=0", "drafter", "base_fraction", 0.0),
    ("prefill.time_per_token_s=1e-6", "prefill", "time_per_token_s", 1e-6),
    ("profile.lookup=padded", "profile", "lookup", "padded"),
    ("acceptance.constant_alpha=0.7", "acceptance", "constant_alpha", 0.7),
    ("acceptance.table=fig4", "acceptance", "table", "fig4"),
])
def test_set_of_each_new_or_optional_key(item, section, key, value):
    got = getattr(getattr(load_scenario(overrides=[item]), section), key)
    assert got == value and type(got) is type(value)


def test_new_cluster_and_engine_defaults():
    s = load_scenario()
    assert (s.cluster.kv_allocation, s.cluster.block_size, s.cluster.prefix_caching) == ("paged", 16, True)
    assert (s.engine.request_overhead_s, s.engine.emission_overhead_s) == (0.005, 0.0)
    assert s.policy.knobs == {} and s.acceptance.rates == {}


def test_set_policy_knobs_reaches_into_the_table():
    assert parse_override("policy.knobs.threshold=0.5") == {"policy": {"knobs": {"threshold": 0.5}}}
    s = load_scenario(overrides=["policy.knobs.x=1", "policy.knobs.threshold=0.5", "policy.knobs.x=2",
                                 "policy.knobs.name=fast", "policy.knobs.flag=true"])
    assert s.policy.knobs == {"x": 2, "threshold": 0.5, "name": "fast", "flag": True}
    assert load_scenario().policy.knobs == {}    # no aliasing of the default table


def test_policy_knobs_from_a_file_merge_with_set(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text("[policy.knobs]\nthreshold = 0.4\nwindow = 8\n\n[acceptance.rates]\nlegal = [0.8, 0.7]\n")
    s = load_scenario(p, ["policy.knobs.window=16", "acceptance.rates.tax=[0.6]"])
    assert s.policy.knobs == {"threshold": 0.4, "window": 16}
    assert s.acceptance.rates == {"legal": [0.8, 0.7], "tax": [0.6]}
    assert s.source == str(p)


def test_old_policy_threshold_points_to_the_knobs_table():
    with pytest.raises(SpecsimInputError, match=r"policy\.knobs\.threshold") as e:
        load_scenario(overrides=["policy.threshold=0.5"])
    assert e.value.field == "policy.threshold"


@pytest.mark.parametrize("item, field, expected", [
    ("cluster.block_size=0", "cluster.block_size", ">= 1"),
    ("cluster.block_size=1.5", "cluster.block_size", "an int"),
    ("cluster.prefix_caching=1", "cluster.prefix_caching", "true or false"),
    ("cluster.prefix_caching=yes", "cluster.prefix_caching", "true or false"),
    ("cluster.kv_allocation=lazy", "cluster.kv_allocation", "'paged', 'reserve'"),
    ("cluster.router=random", "cluster.router", "'prefix-aware'"),
    ("engine.request_overhead_s=-0.1", "engine.request_overhead_s", "in [0, 60] s"),
    ("engine.emission_overhead_s=fast", "engine.emission_overhead_s", "a finite float"),
    ("drafter.kv_fraction=-1", "drafter.kv_fraction", ">= 0"),
    ("drafter.kv_fraction=abc", "drafter.kv_fraction", "or leave the key out"),
    ("policy.knobs=3", "policy.knobs", "a table"),
    ("acceptance.rates.legal=[1.5]", "acceptance.rates.legal", "strictly in (0, 1)"),
])
def test_bad_values_name_the_field_and_the_source(item, field, expected):
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(overrides=[item])
    assert e.value.field == field and e.value.file == f"--set {item}" and expected in e.value.expected
    assert str(e.value).startswith(f"--set {item}, field '{field}': expected ")


def test_bad_value_in_a_file_names_the_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[cluster]\nnum_replicas = 0\n")
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(p)
    assert (e.value.file, e.value.field, e.value.got) == (str(p), "cluster.num_replicas", "0")


@pytest.mark.parametrize("item", ["engine.gamma", "engine=3", ".gamma=3", "policy.knobs.=1", "policy..x=1"])
def test_malformed_overrides(item):
    with pytest.raises(SpecsimInputError, match="section.key=value"):
        parse_override(item)


def test_with_updates_validates_and_names_its_source():
    s = Scenario().with_updates({"cluster": {"block_size": 32}, "policy": {"knobs": {"k": 1}}}, src="<test>")
    assert s.cluster.block_size == 32 and s.policy.knobs == {"k": 1}
    assert s.with_updates({"profile": {"lookup": None}}).profile.lookup is None
    with pytest.raises(SpecsimInputError) as e:
        s.with_updates({"engine": {"request_overhead_s": -1}}, src="<test>")
    assert (e.value.file, e.value.field) == ("<test>", "engine.request_overhead_s")


def test_describe_scenario_lists_every_key_with_its_default():
    text = describe_scenario()
    assert len(text.splitlines()) == sum(len(fields(c)) for c in SECTIONS.values())
    assert "cluster.block_size: int = 16" in text and "engine.request_overhead_s: float = 0.005" in text
    assert "drafter.kv_fraction: float | None = None" in text


def test_bundled_scenarios_load():
    for path in sorted(DEFAULT_SCENARIO.parent.glob("*.toml")):
        s = load_scenario(path)
        assert s.source == str(path) and s.profile.lookup is None


def test_a_knob_typo_in_the_scenario_file_names_its_file_and_line(tmp_path):
    """A [policy.knobs] key no policy declares: the error names the scenario file and the key's line (a fresh
    user's report: every other TOML error did, this one did not); from --set it names no file."""
    from specsim.simulation import simulate
    from helpers import make_trace

    f = tmp_path / "k.toml"
    f.write_text("[engine]\ngamma = 3\n\n[policy.knobs]\nthreshhold = 0.5\n")
    trace = make_trace([0.0], [20], [5])
    with pytest.raises(SpecsimInputError) as e:
        simulate(trace, "specdecpp", load_scenario(f))
    assert (e.value.file, e.value.line, e.value.field) == (str(f), 5, "policy.knobs.threshhold")
    assert "closest valid: 'threshold'" in str(e.value)
    with pytest.raises(SpecsimInputError) as e:
        simulate(trace, "specdecpp", load_scenario(None, ["policy.knobs.thres=0.4"]))
    assert e.value.file is None and e.value.field == "policy.knobs.thres"


def test_overheads_in_milliseconds_by_mistake_are_refused():
    """A per-step overhead of seconds is a unit slip (a fresh user's 5.0 gave 1.3 tok/s/GPU without a word)."""
    for key, bad in (("host_overhead_s", 5.0), ("emission_overhead_s", 2.0), ("request_overhead_s", 500.0)):
        with pytest.raises(SpecsimInputError, match=rf"engine.{key}': expected a float in \[0, .*not ms"):
            load_scenario(None, [f"engine.{key}={bad}"])
    assert load_scenario(None, ["engine.host_overhead_s=1.0"]).engine.host_overhead_s == 1.0     # the bound


def test_a_bad_rate_row_in_a_file_names_its_own_line(tmp_path):
    """A bad [acceptance.rates] row, as a table or inline, is named with its own line (a fresh user's report: the
    error pointed at the section's line)."""
    p = tmp_path / "s.toml"
    p.write_text("[engine]\ngamma = 3\n\n[acceptance.rates]\nchat = [0.8, 0.7, 0.6]\ncode = [0.8, 1.5, 0.6]\n")
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(p)
    assert (e.value.line, e.value.field) == (6, "acceptance.rates.code") and "[0.8, 1.5, 0.6]" in str(e.value)



def test_errors_about_values_a_scenario_file_set_name_its_file_and_line(tmp_path):
    """A fresh user's scenario file with an unknown profile name, or a gamma beyond its drafter's rate table, got
    errors naming neither the file nor the line (every other scenario error names both); a value from --gamma
    keeps the flag's error."""
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    trace = synth_trace(10, 5.0, seed=0)
    bad_profile = tmp_path / "p.toml"
    bad_profile.write_text('# a comment\n[profile]\nname = "h100-llama2-7b-tp3"\n')
    with pytest.raises(SpecsimInputError) as ei:
        simulate(trace, "dspark", load_scenario(bad_profile))
    assert (ei.value.file, ei.value.line, ei.value.field) == (str(bad_profile), 3, "profile.name")
    assert "h100-llama2-7b-tp8" in str(ei.value)
    mtp = tmp_path / "m.toml"
    mtp.write_text('[drafter]\nname = "mtp"\n\n[engine]\ngamma = 3\n')
    with pytest.raises(SpecsimInputError) as ei:
        simulate(trace, "dspark", load_scenario(mtp))
    assert (ei.value.file, ei.value.line, ei.value.field) == (str(mtp), 5, "engine.gamma")
    with pytest.raises(SpecsimInputError) as ei:
        simulate(trace, "dspark", load_scenario(mtp), gamma=2)
    assert ei.value.file is None and ei.value.field == "gamma"


@pytest.mark.parametrize("body, line, policy", [
    ('[policy.knobs]\nthreshold = "abc"\n', 2, "specdecpp"),                 # the wrong type
    ("# c\n[policy.knobs]\nthreshold = 1.5\n", 3, "specdecpp"),               # outside the constructor's range
    ('[engine]\ngamma = 5\n[policy.knobs]\ndraft_len_schedule = "16:3,64:2"\n', 4, "trtllm-draft-len-schedule"),
])
def test_a_knob_value_the_scenario_file_set_names_its_line(tmp_path, body, line, policy):
    """Only an unknown knob name named the file and line; a bad value did not (a fresh user's report)."""
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    path = tmp_path / "k.toml"
    path.write_text(body)
    with pytest.raises(SpecsimInputError) as ei:
        simulate(synth_trace(10, 5.0, seed=0), policy, load_scenario(path))
    assert (ei.value.file, ei.value.line) == (str(path), line)


def test_a_knob_may_be_an_inline_table(tmp_path):
    """draft_len_schedule = {16 = 3, 64 = 2} was refused although the knob is documented as {bound: draft_len}."""
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    path = tmp_path / "s.toml"
    path.write_text("[engine]\ngamma = 3\n[policy.knobs]\ndraft_len_schedule = {16 = 3, 64 = 2}\n")
    sc = load_scenario(path)
    assert sc.policy.knobs == {"draft_len_schedule": {"16": 3, "64": 2}}
    trace = synth_trace(30, 5.0, seed=0)
    by_table = simulate(trace, "trtllm-draft-len-schedule", sc, seed=0)
    by_text = simulate(trace, "trtllm-draft-len-schedule", load_scenario(None, ["engine.gamma=3"]), seed=0,
                       draft_len_schedule="16:3,64:2")
    assert by_table.steps.equals(by_text.steps)


def test_a_knob_may_be_a_list_of_lists_as_vllm_dsds_schedule():
    """vllm-dsd's own default shape, [[1, 1024, 0]], was refused from --set and from a scenario file (only a quoted
    JSON string passed); a list of lists is a knob value, a third level is not."""
    from conftest import REPO
    from specsim.simulation import simulate
    from specsim.workload import load_trace

    sc = load_scenario(overrides=["policy.knobs.num_speculative_tokens_per_batch_size=[[1,1024,0]]"])
    assert sc.policy.knobs["num_speculative_tokens_per_batch_size"] == [[1, 1024, 0]]
    res = simulate(load_trace(REPO / "traces" / "prod.jsonl").head(4), "vllm-dsd", sc)
    assert res.summary["undrafted_steps"] == res.summary["steps"] > 0
    with pytest.raises(SpecsimInputError, match="list of lists"):
        load_scenario(overrides=["policy.knobs.x=[[[1]]]"])
