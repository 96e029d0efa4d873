"""The JSON Schema of scenario files: generated from the section dataclasses, checked in, and met by every bundled
scenario; the ``specsim scenario`` commands print it and the keys."""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from specsim.scenario import DEFAULT_SCENARIO, SECTIONS
from specsim.scenario_schema import scenario_schema

REPO = Path(__file__).resolve().parents[1]
BUNDLED = sorted(DEFAULT_SCENARIO.parent.glob("*.toml"))


def _validate(doc: dict, schema: dict) -> None:
    """Raise when ``doc`` breaks ``schema``: jsonschema when installed, else pydantic on each section."""
    try:
        import jsonschema
    except ImportError:
        for name, values in doc.items():
            assert name in SECTIONS, name
            SECTIONS[name](**values)
        return
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


def test_checked_in_schema_is_the_generated_one():
    on_disk = json.loads((REPO / "docs" / "scenario.schema.json").read_text())
    assert on_disk == scenario_schema(), "regenerate: specsim scenario schema --out docs/scenario.schema.json"


def test_schema_lists_every_key_with_its_default_and_choices():
    props = scenario_schema()["properties"]
    assert set(props) == set(SECTIONS)
    for name, cls in SECTIONS.items():
        assert set(props[name]["properties"]) == {f.name for f in fields(cls)}, name
        assert props[name]["additionalProperties"] is False
    assert props["cluster"]["properties"]["block_size"] == {
        "default": 16, "title": "Block Size", "type": "integer", "description": "tokens per KV block, int >= 1.",
        "minimum": 1}
    assert props["cluster"]["properties"]["kv_allocation"]["enum"] == ["paged", "reserve"]
    kv = props["drafter"]["properties"]["kv_fraction"]          # None by default: no null in TOML, no default
    assert kv["type"] == "number" and "default" not in kv and "anyOf" not in kv
    assert props["acceptance"]["properties"]["rates"]["additionalProperties"] == {
        "items": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, "type": "array", "minItems": 1}


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_scenarios_meet_the_schema(path):
    _validate(tomllib.loads(path.read_text()), scenario_schema())


@pytest.mark.parametrize("text", ["[clustr]\nnum_replicas = 2\n", "[cluster]\nnum_replica = 2\n",
                                  "[cluster]\nrouter = 'random'\n", "[cluster]\nprefix_caching = 1\n",
                                  "[acceptance.rates]\nlegal = ['high']\n", "[drafter]\nkv_fraction = 'none'\n",
                                  "[acceptance.drafters.mtp]\nlenght = 1.8\n", "[acceptance.drafters.mtpp]\nlength = 1.8\n",
                                  "[acceptance.drafters.mtp]\nlength = '1.8'\n"])
def test_schema_refuses_what_loading_refuses(text):
    with pytest.raises(Exception):
        _validate(tomllib.loads(text), scenario_schema())


def test_cli_scenario_schema_and_keys(tmp_path, monkeypatch, capsys):
    from specsim.cli import _register, app

    _register()
    app(["scenario", "schema"], standalone_mode=False)
    assert json.loads(capsys.readouterr().out) == scenario_schema()
    out = tmp_path / "s.json"
    app(["scenario", "schema", "--out", str(out)], standalone_mode=False)
    assert json.loads(out.read_text()) == scenario_schema() and f"written to {out}" in capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", "200")
    app(["scenario", "keys"], standalone_mode=False)
    text = capsys.readouterr().out
    assert sum(line.split(" ")[0].count(".") == 1 for line in text.splitlines()[3:]) == \
        sum(len(fields(c)) for c in SECTIONS.values())


def test_scenario_keys_say_what_an_unset_key_means(monkeypatch, capsys):
    """A key whose default is None shows what leaving it out means (from its docstring), never a bare None."""
    from specsim.cli import _register, app
    from specsim.cli.scenario_cmd import unset_meaning
    from specsim.scenario_schema import describe_scenario

    unset = [line.split(":")[0] for line in describe_scenario().splitlines() if line.endswith("= None")]
    assert len(unset) >= 15
    meanings = {key: unset_meaning(key) for key in unset}
    assert "see its description" not in meanings.values(), meanings
    assert meanings["engine.max_model_len"] == "the model's own"
    assert meanings["cluster.kv_capacity_tokens"].endswith("else 110,000 tokens for a plain table")
    assert meanings["cluster.gpu_memory_utilization"] == "vLLM's 0.9 for a step-model profile, off for a plain table"
    assert meanings["engine.spec_step_s"].startswith("the profile's own term where it states one, else vLLM issue "
                                                     "49548's sourced default 7.75e-4 s")
    assert all("(" not in m and ")" not in m for m in meanings.values())
    _register()
    monkeypatch.setenv("COLUMNS", "300")
    app(["scenario", "keys"], standalone_mode=False)
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line[:1].isalpha()}
    assert all(rows[key].rstrip().endswith(f"unset: {meanings[key]}") for key in unset)


def test_the_schema_takes_a_drafters_own_acceptance():
    _validate(tomllib.loads("[acceptance]\nlength = 3.4\n\n[acceptance.drafters.mtp]\nlength = 1.8\n"
                            "length_gamma = 1\n\n[acceptance.drafters.eagle3]\nrates = {chat = [0.7, 0.6]}\n"),
              scenario_schema())


def _outside(bound, is_int: bool) -> list:
    """Values just outside each end of ``bound`` (an open end itself; a closed end one unit or 1% beyond)."""
    step = 1 if is_int else 0.01
    out = []
    if bound.lo is not None:
        out.append(bound.lo if bound.lo_open else bound.lo - step)
    if bound.hi is not None:
        out.append(bound.hi if bound.hi_open else bound.hi + (step if is_int else max(step, 0.01 * bound.hi)))
    return out


BOUNDED = [(name, key, bound) for name, cls in SECTIONS.items() for key, bound in cls.BOUNDS.items()]


@pytest.mark.parametrize("section, key, bound", BOUNDED, ids=[f"{s}.{k}" for s, k, _ in BOUNDED])
def test_every_range_the_loader_checks_is_in_the_schema_and_its_description(section, key, bound, tmp_path):
    from specsim.errors import SpecsimInputError
    from specsim.scenario import load_scenario

    prop = scenario_schema()["properties"][section]["properties"][key]
    # the numbers themselves, from the same Bound the loader checks (rates: on each number of its rows)
    target = prop["additionalProperties"]["items"] if prop["type"] == "object" else prop
    assert {k: target[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in target} \
        == bound.json_schema() and bound.json_schema()
    assert bound.range_words() in prop["description"], f"{section}.{key}: its description says another range"
    is_int = SECTIONS[section].__pydantic_fields__[key].annotation in (int, int | None)
    for value in _outside(bound, is_int):
        written = f"{{chat = [{value}]}}" if key == "rates" else str(value)
        path = tmp_path / "bad.toml"
        path.write_text(f"[{section}]\n{key} = {written}\n")
        with pytest.raises(SpecsimInputError) as e:
            load_scenario(path)
        assert e.value.line == 2 and e.value.field.startswith(f"{section}.{key}")
        assert bound.range_words() in str(e.value)
        with pytest.raises(Exception, match="less than|greater than|minimum|maximum|expected"):
            _validate(tomllib.loads(path.read_text()), scenario_schema())


def test_an_empty_row_of_rates_is_refused_by_both():
    with pytest.raises(Exception, match="non-empty"):
        _validate({"acceptance": {"rates": {"chat": []}}}, scenario_schema())
    with pytest.raises(Exception, match="non-empty list of rates"):
        SECTIONS["acceptance"](rates={"chat": []})
